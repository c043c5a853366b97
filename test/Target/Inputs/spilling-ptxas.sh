#!/bin/sh
# A stand-in for `ptxas -arch=... -v INPUT -o OUTPUT`. Its -v report gives
# every kernel 48 registers, and those whose name starts with "wide" 80 (or
# their `.maxnreg`, if lower). A kernel whose name starts with "spills"
# spills unless its `.maxnreg` is 128 or more; one starting with
# "widespills" spills under a `.maxnreg` below 80; one starting with
# "oddspills" spills unless its `.maxnreg` is 56 (ptxas is not monotonic);
# one starting with "tight" spills under a `.maxnreg` below 48. With PTXAS_LOG set, each
# run appends the names of the kernels it was given to that file, a line a
# run. With PTXAS_FORGET set to a path, only the first run (the one that
# creates that file) reports anything.
if [ -n "$PTXAS_FORGET" ]; then
  [ -e "$PTXAS_FORGET" ] && exit 0
  : > "$PTXAS_FORGET"
fi
for argument; do
  case $argument in *.ptx) input=$argument ;; esac
done
awk -v logfile="$PTXAS_LOG" '
  function report() {
    if (name == "") return
    given = given (given == "" ? "" : " ") name
    registers = name ~ /^wide/ ? 80 : 48
    if (cap && cap < registers) registers = cap
    spills = (name ~ /^spills/ && cap < 128) ||
             (name ~ /^widespills/ && cap && cap < 80) ||
             (name ~ /^oddspills/ && cap != 56) ||
             (name ~ /^tight/ && cap && cap < 48)
    print "ptxas info    : Compiling entry function '\''" name "'\'' for '\''sm_90'\''"
    print "ptxas info    : Function properties for " name
    if (spills)
      print "    8 bytes stack frame, 8 bytes spill stores, 12 bytes spill loads"
    else
      print "    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads"
    print "ptxas info    : Used " registers " registers, used 0 barriers"
  }
  /\.entry / { report(); name = $3; sub(/\(.*/, "", name); cap = 0 }
  /^\.maxnreg / { cap = $2 }
  END { report(); if (logfile != "") print given >> logfile }
' "$input"
