from odradek.cli import run

run()
