#!/bin/sh
# A stand-in for `ptxas -arch=... -v INPUT -o OUTPUT`. Its -v report gives
# every kernel 48 registers, and says a kernel whose name starts with
# "spills" spills them unless its `.maxnreg` is 128 or more.
for argument; do
  case $argument in *.ptx) input=$argument ;; esac
done
awk '
  function report() {
    if (name == "") return
    print "ptxas info    : Compiling entry function '\''" name "'\'' for '\''sm_90'\''"
    print "ptxas info    : Function properties for " name
    if (name ~ /^spills/ && cap < 128)
      print "    8 bytes stack frame, 8 bytes spill stores, 12 bytes spill loads"
    else
      print "    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads"
    print "ptxas info    : Used 48 registers, used 0 barriers"
  }
  /\.entry / { report(); name = $3; sub(/\(.*/, "", name); cap = 0 }
  /^\.maxnreg / { cap = $2 }
  END { report() }
' "$input"
