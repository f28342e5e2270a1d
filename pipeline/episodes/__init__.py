"""Episodes in: intake (`intake`: validate, store, wake a worker), the processing stage a worker
runs (`process`: claim, extract, decide, write, finish), how episodes are handed to workers
(`dispatch`), and their states (`states`: list, show, retry)."""
