from odradek.cli import main

main()
