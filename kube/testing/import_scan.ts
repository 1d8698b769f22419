/**
 * The import specifiers of TypeScript files, for the layout tests that keep kube/ a library
 * (kube/layout_test.ts) and keep reconcilers on its entry module. A textual scan, not a parser:
 * it sees static imports and re-exports (type-only ones too) that begin a line, and dynamic
 * `import("…")`; a doc comment's example (lines start with ` * `) is not taken for an import.
 *
 * @module
 */
import { dirname, join, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";

/** The repository root (this file is kube/testing/import_scan.ts). */
export const repoRoot: string = resolve(dirname(fileURLToPath(import.meta.url)), "..", "..");

/** One import of one file: its specifier and, for a relative one, the repo-relative target. */
export interface ImportRef {
  /** Repo-relative path of the importing file. */
  file: string;
  specifier: string;
  /** Repo-relative path the specifier resolves to; undefined for a bare or URL specifier. */
  target: string | undefined;
  /** 1-based line of the statement's start. */
  line: number;
}

const STATIC_IMPORT = /^[ \t]*(?:import|export)\b[^"'`;]*?(?:\bfrom\s*)?["']([^"']+)["']/gm;
const DYNAMIC_IMPORT = /\bimport\(\s*["']([^"']+)["']\s*\)/g;

/** The imports of one file's source text (file is repo-relative, for resolving and reports). */
export function importsOf(file: string, source: string): ImportRef[] {
  const refs: ImportRef[] = [];
  for (const re of [STATIC_IMPORT, DYNAMIC_IMPORT]) {
    for (const m of source.matchAll(re)) {
      const specifier = m[1];
      const relativeSpec = specifier.startsWith("./") || specifier.startsWith("../");
      refs.push({
        file,
        specifier,
        target: relativeSpec
          ? relative(repoRoot, join(repoRoot, dirname(file), specifier))
          : undefined,
        line: source.slice(0, m.index).split("\n").length,
      });
    }
  }
  return refs;
}

/** Repo-relative paths of the .ts files under dir (repo-relative), recursively, sorted. */
export function tsFilesUnder(dir: string): string[] {
  const out: string[] = [];
  const walk = (rel: string) => {
    for (const entry of Deno.readDirSync(join(repoRoot, rel))) {
      const child = join(rel, entry.name);
      if (entry.isDirectory) walk(child);
      else if (entry.isFile && entry.name.endsWith(".ts")) out.push(child);
    }
  };
  walk(dir);
  return out.sort();
}

/** The imports of every .ts file under dir. */
export function importsUnder(dir: string): ImportRef[] {
  return tsFilesUnder(dir).flatMap((file) =>
    importsOf(file, Deno.readTextFileSync(join(repoRoot, file)))
  );
}
