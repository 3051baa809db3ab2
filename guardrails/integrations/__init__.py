"""Guardrails for agents you already have: Anthropic Messages, MCP servers, OpenAI function calling.

Each integration is a module of its own and imports its SDK only when used, so
``import guardrails`` works without ``anthropic`` or ``mcp`` installed::

    from guardrails.integrations import anthropic, mcp, openai
"""
