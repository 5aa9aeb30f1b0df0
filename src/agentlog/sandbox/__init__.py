"""The Linux sandbox of ``agentlog run`` (issue 32, docs/sandbox.md).

``landlock`` (the kernel interface), ``policy`` (the floor and its rules), ``runs`` (the runs
on a data root, live grants), ``broker`` (commands run under the live policy), ``record``
(their events), ``route`` (the PreToolUse hook), ``client`` / ``exec_client`` (``agentlog
exec``, native and Python), ``namespaces`` (the run's PID and mount namespaces: nothing
outlives it, the agents' settings directories read-only), ``run`` (``agentlog run`` itself).
"""
