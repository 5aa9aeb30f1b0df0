"""The web dashboard (``agentlog serve``): :mod:`.app`, guarded by :mod:`.security`, fed by :mod:`.data` and :mod:`.live`."""
