// A 2025-11-25 server (the TypeScript SDK's experimental tasks) whose `measure` tool has taskSupport "optional": a
// client may call it plainly (the SDK then waits for the task itself) or ask for a task. It takes `seconds` seconds.
// Here, beside tests/npm/node_modules, so that node finds the SDK: node tests/npm/optional_tasks_server.mjs
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js";
import { InMemoryTaskMessageQueue, InMemoryTaskStore } from "@modelcontextprotocol/sdk/experimental/tasks";
import { z } from "zod";

const server = new McpServer({ name: "optional-tasks", version: "1.0.0" }, {
  capabilities: { tools: {}, tasks: { list: {}, cancel: {}, requests: { tools: { call: {} } } } },
  taskStore: new InMemoryTaskStore(),
  taskMessageQueue: new InMemoryTaskMessageQueue(),
});

server.experimental.tasks.registerToolTask("measure", {
  description: "Measures the tide gauge; takes `seconds` seconds.",
  inputSchema: z.object({ seconds: z.number() }),
  execution: { taskSupport: "optional" },
}, {
  createTask: async (args, extra) => {
    const task = await extra.taskStore.createTask({ ttl: 300000, pollInterval: 200 });
    setTimeout(() => {
      extra.taskStore.storeTaskResult(task.taskId, "completed",
        { content: [{ type: "text", text: `The gauge reads 3.2 m (measured over ${args.seconds} s).` }] });
    }, args.seconds * 1000);
    return { task };
  },
  getTask: async (args, extra) => await extra.taskStore.getTask(extra.taskId),
  getTaskResult: async (args, extra) => await extra.taskStore.getTaskResult(extra.taskId),
});

await server.connect(new StdioServerTransport());
