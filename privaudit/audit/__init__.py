"""Grid configs, the runner, scoring and calibration: where defenses and attacks meet."""
