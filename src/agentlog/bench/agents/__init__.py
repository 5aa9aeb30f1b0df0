"""The real agent CLIs, driven end to end by a scripted model on loopback.

``npm`` installs a pinned release of each agent into a cache; ``server`` and
the three protocol modules (``anthropic``, ``openai``, ``gemini``) answer the
CLI's model requests from a scenario (``scenarios/*.json``: the model's
replies in order); ``drivers`` starts each CLI in a scratch home with
agentlog's hooks installed; ``truth`` reads what the CLI sent back to the model
and compares it with what agentlog recorded. The test suite and
``agentlog bench agents`` both use it.
"""
