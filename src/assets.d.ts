// Files embedded by `bun build --compile` (imported `with { type: "file" }`): their path at run time.
declare module "*.so" { const path: string; export default path; }
declare module "*.safetensors" { const path: string; export default path; }
declare module "*.spvpack" { const path: string; export default path; }
