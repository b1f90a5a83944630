"""LitServe's one non-public name this project needs, in one place (tests/test_plumbing.py pins it).

LitServe 0.2.19 mounts an MCP route whenever the `mcp` package is installed, through mcp 1.x's FastMCP; beside mcp
2.x (codesearch's) the server then dies at start (NameError: MCPServer). It has no option to leave the route out:
`litserve.server._MCP_AVAILABLE`, the flag it reads in `run`, is the only switch. If an upgrade moves it, the test
fails naming this module: look for LitServe's public way to turn MCP off and use it here instead.
"""

from __future__ import annotations

MCP_FLAG = "_MCP_AVAILABLE"  # in litserve.server, read when a server starts its workers


def without_litserve_mcp_route() -> None:
    """Servers started from now on in this process mount no MCP route (ours offer no MCP tools)."""
    import litserve.server

    if not hasattr(litserve.server, MCP_FLAG):
        raise RuntimeError(f"litserve {litserve.__version__} has no litserve.server.{MCP_FLAG}: update "
                           "c2llm_plumbing/compat_litserve.py to the installed LitServe's way of leaving out its MCP "
                           "route, or install the serve extra's tested version (pip install -e '.[serve]')")
    setattr(litserve.server, MCP_FLAG, False)
