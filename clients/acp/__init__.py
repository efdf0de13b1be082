"""`agenthost acp`: an Agent Client Protocol agent over stdio, so editors (Zed
and others) drive agenthost sessions. It is an ordinary client of the gateway
(through clients.sdk); the protocol side is the `agent-client-protocol`
package's JSON-RPC connection and schema models."""
