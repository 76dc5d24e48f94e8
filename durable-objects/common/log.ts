import { Logger } from "../../shared/observability/index.ts";

/** The objects' log: the console, which Workers Logs reads (each invocation's lines with it). */
export const objectLog = new Logger(console);
