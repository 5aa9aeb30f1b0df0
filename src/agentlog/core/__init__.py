"""The shared kernel: paths, ids, the event model, JSON and file helpers.

Imports nothing else from agentlog. The modules the hook imports (``oslite``,
``fastjson``, ``ids``, ``kinds``, ``paths``) use the standard library only.
"""
