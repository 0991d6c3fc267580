"""The user's query between the source and the sink: ``--transform``, ``--sql`` or ``nexmark:qN`` found, shipped to the
executors and applied (`transform`), and the setups refused off its plan before any event is produced (`plan`).
"""
