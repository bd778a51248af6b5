"""privaudit: adversarial privacy auditing for text privatization.

Nothing heavy is imported here: ``privaudit --help`` must answer in well under two seconds.
"""

__version__ = "0.1.0"
