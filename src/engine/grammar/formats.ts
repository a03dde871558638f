// JSON Schema string formats as anchored regular expressions (regex.ts compiles them within JSON strings): RFC 3339
// dates, times and durations, RFC 4122 UUIDs, dotted IPv4, RFC 3986's IPv6 address, URI and URI reference, RFC 1123
// host names, a plain e-mail address. Other formats are unsupported keywords (schema.ts). Pure.

const TIME = `([01][0-9]|2[0-3]):[0-5][0-9]:([0-5][0-9]|60)(\\.[0-9]+)?(Z|z|[+-]([01][0-9]|2[0-3]):[0-5][0-9])`;
const DATE = `[0-9]{4}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])`, OCTET = "(25[0-5]|2[0-4][0-9]|1[0-9]{2}|[1-9]?[0-9])";
const LABEL = "[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?", HEX = "[0-9a-fA-F]";
const IPV4 = `(${OCTET}\\.){3}${OCTET}`, H16 = `${HEX}{1,4}`, LS32 = `(${H16}:${H16}|${IPV4})`;
/** RFC 3986's IPv6address: n groups after "::" (or 6 and no "::"), at most 7 − n before it */
const IPV6 = [`(${H16}:){6}${LS32}`, `::(${H16}:){5}${LS32}`,
  ...[4, 3, 2, 1, 0].map((n, i) => `(${i ? `(${H16}:){0,${i}}` : ""}${H16})?::${n ? `(${H16}:){${n}}` : ""}${LS32}`),
  `((${H16}:){0,5}${H16})?::${H16}`, `((${H16}:){0,6}${H16})?::`].map((x) => `(${x})`).join("|");
/** RFC 3986's URI (scheme ":" hier-part [? query] [# fragment]); a URI reference may also be a relative one */
const PCT = `%${HEX}{2}`, UNRES_SUB = "[A-Za-z0-9._~!$&'()*+,;=-]", PCHAR = `(${UNRES_SUB}|${PCT}|[:@])`;
const AUTHORITY = `((${UNRES_SUB}|${PCT}|:)*@)?(\\[(${IPV6}|[vV]${HEX}+\\.(${UNRES_SUB}|:)+)\\]|${IPV4}|(${UNRES_SUB}|${PCT})*)(:[0-9]*)?`;
const SEGS = `(/${PCHAR}*)*`, QF = `(\\?(${PCHAR}|[/?])*)?(#(${PCHAR}|[/?])*)?`;
const HIER = `(//${AUTHORITY}${SEGS}|/(${PCHAR}+${SEGS})?|${PCHAR}+${SEGS}|)`;
const NOCOLON = `(${UNRES_SUB}|${PCT}|@)`; // a relative path's first segment holds no ":"
/** ISO 8601 durations as RFC 3339's appendix A writes them */
const DTIME = "T([0-9]+H([0-9]+M([0-9]+S)?)?|[0-9]+M([0-9]+S)?|[0-9]+S)";
export const FORMATS: Record<string, string> = {
  date: `^${DATE}$`, time: `^${TIME}$`, "date-time": `^${DATE}[Tt]${TIME}$`,
  duration: `^P(([0-9]+D|[0-9]+M([0-9]+D)?|[0-9]+Y([0-9]+M([0-9]+D)?)?)(${DTIME})?|${DTIME}|[0-9]+W)$`,
  uuid: `^${HEX}{8}-${HEX}{4}-${HEX}{4}-${HEX}{4}-${HEX}{12}$`,
  ipv4: `^${IPV4}$`, ipv6: `^(${IPV6})$`, hostname: `^${LABEL}(\\.${LABEL})*$`,
  email: `^[A-Za-z0-9._%+-]+@${LABEL}(\\.${LABEL})+$`,
  uri: `^[A-Za-z][A-Za-z0-9+.-]*:${HIER}${QF}$`,
  "uri-reference": `^([A-Za-z][A-Za-z0-9+.-]*:${HIER}|//${AUTHORITY}${SEGS}|/(${PCHAR}+${SEGS})?|${NOCOLON}+${SEGS}|)${QF}$`,
};
