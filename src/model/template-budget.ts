// A render budget for chat templates (@huggingface/jinja has none; a looping template took seconds and gigabytes).
// `renderBudgeted` stops a render past RENDER_BUDGET with a ModelError naming chat_template: 500 ms, 256K interpreter
// steps (a 200-message, 20-tool conversation takes ~2.4K; a nested loop holds ~160 B per step), range() of 1M, one
// string over max(8 MiB, 2× the input's characters), or 4× that rendered by all blocks together. The Interpreter is
// guarded once on its prototype; the guards act only inside renderBudgeted. State: the budget of the render running.
import { Interpreter, type Template } from "@huggingface/jinja";
import { ModelError } from "./errors.ts";

export const RENDER_BUDGET = { ms: 500, steps: 1 << 18, range: 1 << 20, bytes: 8 << 20 };

interface Budget { deadline: number; steps: number; rendered: number; maxString: number; maxRendered: number }
let active: Budget | null = null;

const over = (what: string): never => { throw new ModelError(`rendering stopped by its budget: ${what}`, { field: "chat_template" }); };

type Fn = (this: unknown, ...a: unknown[]) => unknown;
const P = Interpreter.prototype as unknown as { evaluate: Fn; renderBlock: Fn; run: Fn; global?: { variables: Map<string, { value: Fn }> } };
const evaluate0 = P.evaluate, renderBlock0 = P.renderBlock, run0 = P.run;
P.evaluate = function (...a) {
  const b = active;
  if (b && ++b.steps % 256 === 0) {
    if (b.steps > RENDER_BUDGET.steps) over(`more than ${RENDER_BUDGET.steps} steps`);
    if (performance.now() > b.deadline) over(`more than ${RENDER_BUDGET.ms} ms`);
  }
  const v = evaluate0.apply(this, a) as { value?: unknown };
  if (b && typeof v?.value === "string" && v.value.length > b.maxString) over(`a string of more than ${b.maxString} characters`);
  return v;
};
P.renderBlock = function (...a) {
  const s = renderBlock0.apply(this, a) as string, b = active;
  if (b && (s.length > b.maxString || (b.rendered += s.length) > b.maxRendered)) over(`more than ${b.maxRendered} characters rendered`);
  return s;
};
P.run = function (...a) {
  const range = active ? (this as typeof P).global?.variables.get("range") : undefined;
  if (range) { // (one FunctionValue per render: the library makes its globals afresh each time)
    const call = range.value;
    range.value = function (args: unknown) {
      const [x, y, z = 1] = (args as { value: unknown }[]).map((v) => Number(v.value));
      const n = y === undefined || Number.isNaN(y) ? x : z === 0 ? 0 : (y - x) / z;
      if (n > RENDER_BUDGET.range) over(`range() of ${Math.ceil(n)} numbers (the limit is ${RENDER_BUDGET.range})`);
      return call.apply(this, arguments as unknown as unknown[]);
    };
  }
  return run0.apply(this, a);
};

/** t.render(items) under the budget; `inputChars`: the characters of the request's own text (messages, tools), which
 *  raise the string limits so that a long legitimate prompt renders. */
export function renderBudgeted(t: Template, items: Record<string, unknown>, inputChars: number): string {
  const maxString = Math.max(RENDER_BUDGET.bytes, 2 * inputChars);
  const prev = active;
  active = { deadline: performance.now() + RENDER_BUDGET.ms, steps: 0, rendered: 0, maxString, maxRendered: 4 * maxString };
  try { return t.render(items); } finally { active = prev; }
}
