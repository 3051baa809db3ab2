"""Guardrails for agents you already have: Anthropic Messages, MCP servers, OpenAI function calling,
and agents built on the Microsoft Agent Framework, Google ADK or the Claude Agent SDK.

Each integration is a module of its own and imports its SDK only when used, so
``import guardrails`` works without ``anthropic`` or ``mcp`` installed::

    from guardrails.integrations import anthropic, mcp, openai
    from guardrails.integrations import agent_framework, claude_agent, google_adk
"""
