/**
 * The Deno permission flags of a `deno task` (read from deno.json), so a harness that starts the
 * program itself grants exactly what the task does and cannot drift from it.
 *
 * @module
 */
const repoRoot = new URL("../../", import.meta.url).pathname;

/** The `--allow-*` words of the named task in deno.json. */
export async function taskPermissionFlags(task: string): Promise<string[]> {
  const config = JSON.parse(await Deno.readTextFile(`${repoRoot}deno.json`)) as {
    tasks?: Record<string, string>;
  };
  const command = config.tasks?.[task];
  if (command === undefined) throw new Error(`deno.json has no task ${JSON.stringify(task)}`);
  return command.split(/\s+/).filter((w) => w.startsWith("--allow-"));
}
