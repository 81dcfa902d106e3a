"""The standing adversarial suite: one module per attack class, named after what it attacks.

Each test here reproduces an attack an audit found (`../shared/notes/2026-11-audit/`, `2026-11-27-audit/`)
over real HTTP, real MCP servers and, where the attack needs one, a real Redis, and fails on the code before
its fix. The module's docstring names the audit's finding and what the attacker tried.
"""
