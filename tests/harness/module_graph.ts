/**
 * A module's static import graph as `deno info --json` reports it: what the runtime loads before
 * the module's body runs. Start-up tests use it to keep costly modules (Deno's Node shims, npm
 * packages) off the start-up path.
 *
 * @module
 */

/** One module of `deno info --json`. */
interface InfoModule {
  specifier: string;
  dependencies?: { specifier: string; code?: { specifier: string }; isDynamic?: boolean }[];
}

/**
 * Every specifier `path` loads through static imports (its own included), following neither
 * dynamic imports nor type-only ones (`deno info` leaves those out of `code`).
 */
export async function staticImportClosure(path: string): Promise<Set<string>> {
  const out = await new Deno.Command(Deno.execPath(), {
    args: ["info", "--json", path],
    stdout: "piped",
    stderr: "piped",
  }).output();
  if (out.code !== 0) {
    throw new Error(`deno info ${path}: ${new TextDecoder().decode(out.stderr)}`);
  }
  const graph = JSON.parse(new TextDecoder().decode(out.stdout)) as {
    roots: string[];
    modules: InfoModule[];
  };
  const bySpecifier = new Map(graph.modules.map((m) => [m.specifier, m]));
  const seen = new Set<string>();
  const queue = [...graph.roots];
  while (queue.length > 0) {
    const spec = queue.pop()!;
    if (seen.has(spec)) continue;
    seen.add(spec);
    for (const dep of bySpecifier.get(spec)?.dependencies ?? []) {
      if (dep.code && !dep.isDynamic) queue.push(dep.code.specifier);
    }
  }
  return seen;
}
