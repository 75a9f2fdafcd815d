"""`python -m seq2seq COMMAND ...`: the same as the installed `seq2seq` command."""

from seq2seq.commands import main

if __name__ == "__main__":
    main()
