"""``python -m imagecheck`` runs the command line."""

from imagecheck.cli import main

if __name__ == "__main__":
    main()
