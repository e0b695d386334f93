"""Drive `chapters mcp` with the official MCP Python SDK's client (mcp 2.x), as an agent would.

Usage: mcp_client.py ERA CHAPTERS_BINARY WORKSPACE QUERY ARTIFACT_HASH
  ERA: `modern`  - the SDK's default connect (`mode="auto"`: `server/discover`, 2026-07-28)
       `legacy`  - the SDK's `mode="legacy"`: the `initialize` handshake (2025-11-25)
       `2025-06-18` - the SDK client cannot offer an older handshake version, so this era is a
                  raw JSON-RPC exchange over the child's stdio (initialize, tools/list, calls)
Prints one JSON document on stdout; tests/it/mcp.rs asserts on it. The child inherits this
process's environment (DSH_HOME, CHAPTERS_HARNESS_ID).
"""

import asyncio
import json
import os
import subprocess
import sys

# Queries a person or a model may type that must give an answer or an error result, never a
# protocol error or a crash: 10,000 words, unbalanced quotes, a lone `-`, FTS5 syntax as words.
BAD_QUERIES = [
    " ".join(f"word{i}" for i in range(10_000)),
    '"unbalanced quote csv',
    "-",
    '" * NEAR : AND OR NOT ( ) ^ { } + csv',
    "NEAR(csv exporter, 2)",
    "title:csv",
    "*",
    "csv: exporter* (header) ^ {} + AND OR \"row",
]


def tool_result(result):
    """A CallToolResult (SDK object or raw dict) as plain JSON."""
    if isinstance(result, dict):
        return {
            "isError": result.get("isError", False),
            "text": "".join(c.get("text", "") for c in result.get("content", [])),
            "structured": result.get("structuredContent"),
            "resultType": result.get("resultType"),
        }
    return {
        "isError": result.is_error,
        "text": "".join(getattr(c, "text", "") for c in result.content),
        "structured": result.structured_content,
        "resultType": result.result_type,
    }


async def sdk_session(era, binary, workspace, query, artifact):
    from mcp.client.client import Client
    from mcp.client.stdio import StdioServerParameters
    from mcp.shared.exceptions import MCPError

    params = StdioServerParameters(
        command=binary, args=["mcp", "--workspace", workspace], env=dict(os.environ)
    )
    mode = "auto" if era == "modern" else "legacy"
    out = {"era": era}
    async with Client(params, mode=mode) as client:
        out["protocolVersion"] = client.protocol_version
        info = client.server_info
        out["serverName"] = info.name if info is not None else None
        listed = await client.list_tools()
        out["tools"] = [
            {
                "name": t.name,
                "title": t.title,
                "hasOutputSchema": t.output_schema is not None,
                "inputProperties": sorted((t.input_schema or {}).get("properties", {})),
            }
            for t in listed.tools
        ]
        found = tool_result(await client.call_tool("chapters_search", {"query": query}))
        out["search"] = found
        out["searchFiltered"] = tool_result(
            await client.call_tool("chapters_search", {"query": query, "kind": "plan"})
        )
        out["topicOnly"] = tool_result(await client.call_tool("chapters_search", {"topic": "csv"}))
        out["sinceFuture"] = tool_result(
            await client.call_tool("chapters_search", {"query": query, "since": "2999-01-01"})
        )
        matches = (found["structured"] or {}).get("matches") or []
        if matches:
            first = tool_result(
                await client.call_tool("chapters_read", {"id": matches[0]["id"], "max_tokens": 40})
            )
            out["read"] = first
            cursor = (first["structured"] or {}).get("nextCursor")
            if cursor:
                out["readNext"] = tool_result(
                    await client.call_tool(
                        "chapters_read", {"id": matches[0]["id"], "cursor": cursor, "max_tokens": 40}
                    )
                )
        # The other three tools: the SDK checks each structuredContent against its outputSchema.
        out["rules"] = tool_result(
            await client.call_tool("chapters_rules", {"task": "change the csv exporter"})
        )
        out["propose"] = [
            tool_result(
                await client.call_tool(
                    "chapters_rule_propose",
                    {"category": "testing", "text": "Every exporter change ships with a golden file."},
                )
            )
            for _ in range(2)
        ]
        out["artifact"] = tool_result(
            await client.call_tool("chapters_artifact", {"hash": artifact, "max_tokens": 50})
        )
        out["badArguments"] = [
            tool_result(await client.call_tool(name, args))
            for name, args in [
                ("chapters_search", {"query": 7}),
                ("chapters_search", {"querry": "csv"}),
                ("chapters_search", {"query": "csv", "since": "last tuesday"}),
                ("chapters_read", {"id": "nothing/99"}),
                ("chapters_read", {}),
                ("chapters_artifact", {"hash": "xyz"}),
            ]
        ]
        out["badQueries"] = []
        for q in BAD_QUERIES:
            try:
                r = tool_result(await client.call_tool("chapters_search", {"query": q}))
            except MCPError as e:  # a protocol error: the test fails on it
                r = {"protocolError": e.error.code, "message": e.error.message}
            out["badQueries"].append(r)
        try:
            await client.call_tool("chapters_nothing", {})
            out["unknownTool"] = None
        except MCPError as e:
            out["unknownTool"] = e.error.code
    return out


def raw_session(version, binary, workspace, query):
    """The handshake at an older version, spoken by hand (the SDK offers only its newest)."""
    child = subprocess.Popen(
        [binary, "mcp", "--workspace", workspace],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    next_id = [0]

    def request(method, params):
        next_id[0] += 1
        child.stdin.write(
            json.dumps({"jsonrpc": "2.0", "id": next_id[0], "method": method, "params": params}) + "\n"
        )
        child.stdin.flush()
        answer = json.loads(child.stdout.readline())
        assert answer["id"] == next_id[0], answer
        return answer

    init = request(
        "initialize",
        {"protocolVersion": version, "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}},
    )
    child.stdin.write(json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}) + "\n")
    out = {"era": version, "protocolVersion": init["result"]["protocolVersion"]}
    out["tools"] = [
        {"name": t["name"], "title": t.get("title"), "hasOutputSchema": "outputSchema" in t}
        for t in request("tools/list", {})["result"]["tools"]
    ]
    out["search"] = tool_result(
        request("tools/call", {"name": "chapters_search", "arguments": {"query": query}})["result"]
    )
    # The 2026 envelope at a version this server does not speak: -32022 naming the supported.
    bad = request(
        "tools/list",
        {"_meta": {"io.modelcontextprotocol/protocolVersion": "2099-01-01",
                   "io.modelcontextprotocol/clientCapabilities": {}}},
    )
    out["unsupportedVersion"] = bad.get("error")
    child.stdin.close()
    out["exit"] = child.wait(timeout=30)
    return out


def main():
    era, binary, workspace, query, artifact = sys.argv[1:6]
    if era in ("modern", "legacy"):
        out = asyncio.run(sdk_session(era, binary, workspace, query, artifact))
    else:
        out = raw_session(era, binary, workspace, query)
    import mcp  # noqa: F401 - the version the test ran against

    from importlib.metadata import version

    out["sdk"] = version("mcp")
    json.dump(out, sys.stdout)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
