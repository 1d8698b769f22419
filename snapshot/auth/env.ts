/** Small seams over the process environment so credential sources are testable without globals. */
import { permittedEnv } from "../../common/env.ts";

/** Reads an environment variable (undefined when unset). */
export type EnvGetter = (name: string) => string | undefined;

/** Reads a whole text file; must throw Deno.errors.NotFound for a missing file. */
export type TextFileReader = (path: string) => Promise<string>;

/** The real environment; a variable the sandbox does not grant reads as unset. */
export const processEnv: EnvGetter = permittedEnv;

/** The real file system (needs --allow-read for the paths read). */
export const readFile: TextFileReader = (path: string): Promise<string> => Deno.readTextFile(path);

/** Builds an EnvGetter over a plain record (for tests and explicit configuration). */
export function envFrom(vars: Record<string, string | undefined>): EnvGetter {
  return (name) => vars[name];
}

/** Reads path, or returns undefined when it does not exist (other errors propagate). */
export async function readIfExists(
  read: TextFileReader,
  path: string,
): Promise<string | undefined> {
  try {
    return await read(path);
  } catch (err) {
    if (err instanceof Deno.errors.NotFound || err instanceof Deno.errors.IsADirectory) {
      return undefined;
    }
    throw err;
  }
}
