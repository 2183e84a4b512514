"""``python -m encore.info``: prints encore.show_config(), to paste into a bug report."""

from encore import show_config

if __name__ == "__main__":
    show_config()
