"""Pareto frontiers, plots and (later) the leaderboard and reports."""
