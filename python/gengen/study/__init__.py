"""A study: its file and settings, the families and tables it names, its runs' paths, the plan, the schedule and
the power planner."""
