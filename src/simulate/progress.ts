import { eta } from "../offline/progress.js";
import type { SimulationProgress } from "./run.js";

function clock(ms: number): string {
  const seconds = Math.floor(ms / 1000);
  return `${Math.floor(seconds / 60)}:${String(seconds % 60).padStart(2, "0")}`;
}

/**
 * Simulate's progress line (offline/progress.ts: stderr, a terminal only): the mode running,
 * the virtual time it has reached, and the time left for the whole run.
 */
export function describeSimulation(progress: SimulationProgress, seconds: number): string {
  const done = (progress.modeIndex + progress.simulatedMs / progress.totalMs) / progress.modes;
  return `simulating ${progress.mode} (mode ${progress.modeIndex + 1} of ${progress.modes}): ${clock(progress.simulatedMs)} of ${clock(progress.totalMs)} simulated${eta(done, seconds)}`;
}
