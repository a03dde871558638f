// GrammarError: the one error type of the grammar engine (GBNF syntax, grammar structure, JSON
// Schema conversion, tokens the grammar rejects). Holds no state beyond its fields: the message
// names where the problem is (`line L, column C` for GBNF text, a JSON pointer for schemas).

export interface GrammarErrorWhere {
  line?: number; // 1-based
  col?: number; // 1-based, in UTF-16 code units
  rule?: string;
  path?: string; // JSON pointer into a schema, e.g. "#/properties/name"
}

export class GrammarError extends Error {
  line?: number;
  col?: number;
  rule?: string;
  path?: string;
  /** the bare problem, without the location prefix */
  detail: string;

  constructor(detail: string, where: GrammarErrorWhere = {}) {
    const at: string[] = [];
    if (where.line !== undefined) at.push(`line ${where.line}, column ${where.col ?? 1}`);
    if (where.rule !== undefined) at.push(`rule ${where.rule}`);
    if (where.path !== undefined) at.push(`schema ${where.path}`);
    super(at.length ? `${at.join(": ")}: ${detail}` : detail);
    this.name = "GrammarError";
    this.detail = detail;
    Object.assign(this, where);
  }
}

/** 1-based line and column of offset `i` in `text`. */
export function lineCol(text: string, i: number): { line: number; col: number } {
  let line = 1, start = 0;
  for (let j = 0; j < i && j < text.length; j++) if (text.charCodeAt(j) === 10) { line++; start = j + 1; }
  return { line, col: i - start + 1 };
}
