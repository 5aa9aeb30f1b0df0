"""The dashboard's route handlers: top-level functions over the app's state (``request.app.state.web``).

:mod:`.common` holds the state and what every handler shares (rendering, reading in a
thread, errors); :mod:`.pages` the read pages (and the SQL download, "verify now"),
:mod:`.memory` the memory and proposal pages and the proposal actions, :mod:`.stream`
the live stream. :func:`agentlog.web.app.create_app` builds the route list from them.
"""
