"""Pareto frontiers and plots, the hypervolume leaderboard, and self-contained HTML reports."""
