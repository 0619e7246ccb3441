"""A study: its file and settings, the families and tables it names, the plan, the schedule and the power planner."""
