"""The MCP SDK's non-public names codesearch's server needs, in one place (tests/test_plumbing.py pins them).

- `run_on_streams`: MCPServer's stdio loop on streams of our own. `MCPServer.run_stdio_async` wires the stdio
  transport straight to its low-level server (`MCPServer._lowlevel_server`), with no way to put a filter between
  them; codesearch answers malformed JSON-RPC there (codesearch.mcp_server.answer_malformed).
- `typed_tool`: a tool whose arguments are one pydantic request model. The SDK builds a tool's argument model from
  the function's signature, with no way to refuse unknown arguments or to be strict; so the tool is built from the
  function, then given the request model as its argument model (`Tool.fn_metadata.arg_model`, a subclass of the
  SDK's `ArgModelBase`, read at every call) and input schema.

If an upgrade moves one of these, the test fails naming this module: look for the SDK's public way (a transport
hook, a tool built from a model) and use it here instead.
"""

from __future__ import annotations

from typing import Any


async def run_on_streams(server, incoming, outgoing) -> None:
    """Run the MCPServer `server` on (`incoming`, `outgoing`), as its run_stdio_async does on stdin/stdout's."""
    lowlevel = server._lowlevel_server  # MCPServer's own server, which its run_stdio_async runs
    await lowlevel.run(incoming, outgoing, lowlevel.create_initialization_options())


def typed_tool(function, request_model: type):
    """An MCP tool whose arguments are the fields of `request_model` (a pydantic model), passed to
    `function(request)` as one validated request."""
    from mcp.server.mcpserver.tools import Tool
    from mcp.server.mcpserver.utilities.func_metadata import ArgModelBase
    from pydantic import ConfigDict

    class Arguments(request_model, ArgModelBase):
        model_config = ConfigDict(title=request_model.__name__)  # what errors and the schema call it

        def model_dump_one_level(self) -> dict[str, Any]:  # the SDK calls function(**this)
            return {"request": self}

    tool = Tool.from_function(function)
    tool.fn_metadata.arg_model = Arguments
    tool.parameters = Arguments.model_json_schema(by_alias=True)
    return tool
