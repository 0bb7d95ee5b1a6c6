"""The simulation engines (fast and detailed) and the steady-state breakdown."""
