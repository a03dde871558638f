// This process's threads as /proc sees them (Linux). No state.
import { readdirSync, readFileSync } from "node:fs";

/** each live thread's nice value, the main thread's first (field 19 of /proc/self/task/<tid>/stat, fields counted after
 *  the command's ')'; a thread that ended meanwhile is left out) */
export const threadNices = () => readdirSync("/proc/self/task").flatMap((t) => {
  try { return [Number(readFileSync(`/proc/self/task/${t}/stat`, "utf8").split(") ")[1].split(" ")[16])]; } catch { return []; }
});
