/**
 * The VM simulator's public surface (see sim/simulator.ts and docs/simulator.md). Test helpers
 * (stub registry, operator-shaped pods, a simulator on the fake API) live in sim/testing/.
 *
 * @module
 */
export * from "./simulator.ts";
