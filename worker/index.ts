import { createApp } from "./app.ts";

export { Thread } from "../durable-objects/thread.ts";

export default createApp();
