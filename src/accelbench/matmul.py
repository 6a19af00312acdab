"""TODO"""

def add_arguments(p):
    pass


def cli(args):
    raise NotImplementedError
