#!/usr/bin/env bash
# Every `sparsetune` command refuses bad input with a clear message and the
# documented exit code (2 usage, 1 failure), and leaves a foreign or corrupt
# database file byte for byte as it was.
set -u
bin=$1
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
cd "$dir"
fails=0
passes=0

# expect CODE PATTERN -- command...: exit code and a message matching PATTERN.
expect() {
  local code=$1 pattern=$2
  shift 3
  local out
  out=$("$@" 2>&1)
  local rc=$?
  if [ "$rc" -ne "$code" ] || ! grep -qiE -- "$pattern" <<<"$out"; then
    echo "FAIL: '$*' exited $rc (want $code), output:"
    printf '%s\n' "$out" | head -5 | sed 's/^/    /'
    fails=$((fails + 1))
  else
    passes=$((passes + 1))
  fi
}

expect 2 "unknown command 'frobnicate'" -- "$bin" frobnicate
expect 2 "usage: sparsetune" -- "$bin"
expect 0 "usage: sparsetune tune" -- "$bin" tune --help
expect 0 "^sparsetune [0-9]+\.[0-9]+" -- "$bin" version
expect 0 "usage: sparsetune version" -- "$bin" version --help
expect 0 "usage: sparsetune version" -- "$bin" version -h
expect 2 "version: unknown option --bogus" -- "$bin" version --bogus
expect 2 "version: unexpected argument 'foo'" -- "$bin" version foo
expect 2 "unexpected argument 'foo'" -- "$bin" --version foo
expect 2 "option --db does not apply to this command" -- "$bin" version --db x.db
expect 0 "usage: sparsetune regress" -- "$bin" help regress
# A command's help names no file outside the source tree or the install.
for cmd in generate compile tune bench show regress history report merge eval export version; do
  "$bin" $cmd --help | grep -q '\.\./' && { echo "FAIL: $cmd --help points outside the tree"; fails=$((fails + 1)); }
done
expect 0 "usage: sparsetune <command>" -- "$bin" help
expect 2 "help: unknown command 'bogus'" -- "$bin" help bogus
expect 2 "help: unexpected argument 'extra'" -- "$bin" help regress extra
expect 2 "unknown option --colour" -- "$bin" show --colour
expect 2 "option --arch does not apply to this command" -- "$bin" show --arch sm_90a
expect 2 "option --match does not apply to this command" -- "$bin" bench --match .kr.
expect 2 "--match needs 1 to 100 characters" -- "$bin" tune --match ""
expect 2 "needs a value" -- "$bin" tune --match
expect 2 "without spaces" -- "$bin" tune --match "kr cache=cold"
expect 2 "--search=some is not full or model" -- "$bin" tune --search some
expect 2 "option --search does not apply to this command" -- "$bin" bench --search model
expect 2 "--search model goes with show run ID" -- "$bin" show runs --search model
expect 2 "option --cold does not apply to this command" -- "$bin" show --cold
expect 2 "option --cold does not apply to this command" -- "$bin" compile --cold
expect 0 "--cold" -- "$bin" bench --help
expect 0 "--cold" -- "$bin" tune --help
expect 2 "--jobs=0 is not a whole number in 1..256" -- "$bin" compile --jobs 0
expect 2 "--device=x is not a whole number" -- "$bin" tune --device x
expect 2 "needs a value" -- "$bin" tune --suite
expect 2 "--threshold=abc is not a fraction" -- "$bin" regress --base 1 --head 2 --threshold abc
expect 2 "--base RUN and --head RUN are both required" -- "$bin" regress --base 1
expect 0 "usage: sparsetune history" -- "$bin" help history
expect 2 "--suite NAME is required" -- "$bin" history
expect 2 "--min-runs=0 is not a whole number" -- "$bin" history --suite quick --min-runs 0
expect 2 "option --base does not apply to this command" -- "$bin" history --suite quick --base 1
expect 2 "option --min-runs does not apply to this command" -- "$bin" regress --base 1 --head 2 --min-runs 3
expect 0 "usage: sparsetune report" -- "$bin" help report
expect 0 "usage: sparsetune merge" -- "$bin" help merge
expect 2 "name the databases to merge into" -- "$bin" merge --db merged.db
expect 2 "option --suite does not apply to this command" -- "$bin" merge --db merged.db --suite quick a.db
expect 2 "unexpected argument 'a.db'" -- "$bin" history --suite quick a.db
expect 2 "--html FILE is required" -- "$bin" report --suite quick
expect 2 "--html needs a file name" -- "$bin" report --suite quick --html ""
expect 2 "--suite NAME is required" -- "$bin" report --html page.html
expect 2 "option --html does not apply to this command" -- "$bin" history --suite quick --html page.html
expect 2 "option --json does not apply to this command" -- "$bin" report --suite quick --html page.html --json
expect 2 "show run needs a run id" -- "$bin" show run
expect 2 "unexpected argument '5'" -- "$bin" show runs 5
expect 2 "unexpected argument 'extra'" -- "$bin" show run 3 extra
expect 2 "unexpected argument 'extra'" -- "$bin" show winners "NVIDIA H200" extra
expect 2 "show winners needs a device name" -- "$bin" show winners ""
expect 0 "winners DEVICE" -- "$bin" show --help
expect 2 "unknown report 'everything'" -- "$bin" show everything
expect 2 "unexpected argument 'extra'" -- "$bin" generate extra
expect 2 "suite.*nope" -- "$bin" generate --suite nope --db gen.db
expect 2 "op.*attention_v9|no shapes" -- "$bin" generate --op attention_v9 --db gen.db
expect 2 "unknown op 'bogus'" -- "$bin" generate --op index_decode,bogus --db gen.db
expect 2 "unknown op ''" -- "$bin" generate --op index_decode, --db gen.db
expect 0 "--op OP.*comma|OP,OP" -- "$bin" bench --help
expect 2 "sm_80a|arch" -- "$bin" compile --arch sm_80a --db gen.db --suite smoke

# A target NVRTC does not compile for is refused before anything is written:
# no new database, and an existing one byte for byte as it was.
for cmd in compile tune; do
  expect 2 'arch="garbage" is not a GPU architecture' -- "$bin" $cmd --arch garbage --db new.db
  expect 2 "arch=sm_30 is not supported by NVRTC" -- "$bin" $cmd --arch sm_30 --db new.db --suite smoke --op index_decode
  [ -e new.db ] && { echo "FAIL: $cmd --arch garbage created new.db"; fails=$((fails + 1)); }
  rm -f new.db new.db-wal new.db-shm
done
"$bin" generate --suite smoke --op index_decode --db kept.db >/dev/null || { echo "FAIL: generate kept.db"; exit 1; }
before=$(md5sum kept.db)
expect 2 "is not a GPU architecture" -- "$bin" compile --arch garbage --db kept.db --suite anchors --op index_decode
expect 2 "is not a GPU architecture" -- "$bin" tune --arch sm_80a --db kept.db --suite anchors --op index_decode
[ "$(md5sum kept.db)" = "$before" ] || { echo "FAIL: kept.db was modified"; fails=$((fails + 1)); }
[ -e kept.db-wal ] && { echo "FAIL: kept.db-wal was created"; fails=$((fails + 1)); }

# Suites that do not parse or fail as they load: Lua's reason with the file
# and line, exit 1, and no database written.
home=$dir/home
mkdir "$home" && cp -R "$ST_SOURCE_DIR/generator" "$ST_SOURCE_DIR/templates" "$home"/ || exit 1
sed -i '0,/^local M = {}$/s//local M = {/' "$home/generator/suites.lua"
expect 1 "suites\.lua:[0-9]+: unexpected symbol near 'local'" -- \
  env SPARSETUNE_HOME="$home" "$bin" generate --suite smoke --db broken.db
cp "$ST_SOURCE_DIR/generator/suites.lua" "$home/generator/suites.lua"
sed -i '0,/^local M = {}$/s//local M = nil + 1/' "$home/generator/suites.lua"
expect 1 "suites\.lua:[0-9]+: attempt to perform arithmetic on a nil value" -- \
  env SPARSETUNE_HOME="$home" "$bin" generate --suite smoke --db broken.db
[ -e broken.db ] && { echo "FAIL: broken.db was created"; fails=$((fails + 1)); }

# A file that is not SQLite, one of another application, a corrupt one: refused, untouched.
printf 'not a database, just text\n' >foreign.txt
sqlite3 other.db "CREATE TABLE notes(x); INSERT INTO notes VALUES (1);" 2>/dev/null ||
  printf 'SQLite format 3\0' >other.db
head -c 4096 /dev/urandom >random.bin
for f in foreign.txt other.db random.bin; do
  before=$(md5sum "$f")
  expect 1 "$f" -- "$bin" generate --suite smoke --db "$f"
  expect 1 "$f" -- "$bin" show runs --db "$f"
  expect 1 "$f" -- "$bin" regress --base 1 --head 2 --db "$f"
  [ "$(md5sum "$f")" = "$before" ] || { echo "FAIL: $f was modified"; fails=$((fails + 1)); }
  [ -e "$f-wal" ] && { echo "FAIL: $f-wal was created"; fails=$((fails + 1)); }
done
expect 2 "cannot be read" -- "$bin" bench --db missing.db
expect 2 "takes neither --db nor --harness" -- "$bin" bench --builtin --db missing.db
expect 2 "cannot be read" -- "$bin" eval --db missing.db
expect 2 "leave no shape" -- "$bin" eval --decode 0 --prefill 0
expect 2 "--decode=-1 is not a whole number in 0..1000" -- "$bin" eval --decode -1
expect 2 "--prefill=1001 is not a whole number" -- "$bin" eval --prefill 1001
expect 2 "--suite and --op choose the shapes of --leave-one-out" -- "$bin" eval --suite anchors
expect 2 "--suite and --op choose the shapes of --leave-one-out" -- "$bin" eval --op index_decode
expect 2 "--decode, --prefill and --oracle-db do not apply" -- "$bin" eval --leave-one-out --decode 5
expect 2 "--decode, --prefill and --oracle-db do not apply" -- "$bin" eval --leave-one-out --oracle-db o.db
expect 2 "cannot be read" -- "$bin" eval --leave-one-out --db missing.db
expect 2 "with --leave-one-out the oracle is the database itself" -- "$bin" eval --leave-one-out --search model
expect 2 "--search=fast is not full or model" -- "$bin" eval --search fast
expect 2 "option --decode does not apply" -- "$bin" bench --decode 3
expect 2 "unknown suite 'random-other:1:2'" -- "$bin" generate --suite random-other:1:2 --db random.db
expect 2 "count 0 is not an integer in 1..1000" -- "$bin" generate --suite random-decode:1:0 --db random.db
expect 2 "cannot be read" -- "$bin" bench --harness --db missing.db
expect 2 "cannot be read" -- "$bin" bench --cold --db missing.db
expect 2 "does not apply to this command" -- "$bin" tune --harness
# An option given is an option used: an abbreviated --suite is bench's suite
# too, and compile's --device (the GPU whose target to take) is refused
# beside --arch rather than ignored (--op none: nothing compiles either way).
expect 2 "unknown suite 'nope'" -- "$bin" bench --sui nope --db gen.db
expect 2 "unknown suite 'nope'" -- "$bin" bench --suite=nope --db gen.db
expect 2 "--device picks the GPU whose architecture to target" -- \
  "$bin" compile --arch sm_90a --device 1 --op none --db new.db
[ -e new.db ] && { echo "FAIL: compile --arch --device created new.db"; fails=$((fails + 1)); }
expect 2 "not in the database" -- "$bin" regress --base 1 --head 2 --db gen.db

# export: both files named, never the same one, known ops; a source that is
# missing, not ours or corrupt refused; nothing written at --out either way
# (tests/test_export.c checks the export itself).
expect 0 "usage: sparsetune export" -- "$bin" export --help
expect 0 "usage: sparsetune export" -- "$bin" help export
expect 2 "--db SRC is required" -- "$bin" export --out out.db
expect 2 "--out DST is required" -- "$bin" export --db gen.db
expect 2 "--out needs a file name" -- "$bin" export --db gen.db --out ""
expect 2 "is the file --db names" -- "$bin" export --db gen.db --out ./gen.db
expect 2 "unknown op 'bogus'" -- "$bin" export --db gen.db --out out.db --op index_decode,bogus
expect 2 "--device needs a device model's name" -- "$bin" export --db gen.db --out out.db --device ""
expect 2 "option --suite does not apply to this command" -- "$bin" export --db gen.db --out out.db --suite smoke
expect 2 "unexpected argument 'extra'" -- "$bin" export --db gen.db --out out.db extra
expect 2 "cannot be read" -- "$bin" export --db missing.db --out out.db
expect 1 "has no winners to export" -- "$bin" export --db gen.db --out out.db
for f in foreign.txt other.db random.bin; do
  before=$(md5sum "$f")
  expect 1 "$f" -- "$bin" export --db "$f" --out out.db
  [ "$(md5sum "$f")" = "$before" ] || { echo "FAIL: export modified $f"; fails=$((fails + 1)); }
done
[ -e out.db ] && { echo "FAIL: a refused export created out.db"; fails=$((fails + 1)); }
ls | grep -q '\.export-' && { echo "FAIL: a refused export left a staged file"; fails=$((fails + 1)); }

# builtin: no GPU and no database, so it runs here; bad input is refused.
expect 0 "sparse_attn_decode.bf16.d128.g16.w4.s1.tma.pvd.single.c16/auto \\(16 splits\\)" -- "$bin" builtin --suite anchors
expect 0 '"splits":16,"workspace_bytes":' -- "$bin" builtin --suite anchors --op sparse_attn_decode --json
expect 0 "mla_sparse_decode.fp8.h64.t64.n256.wg.pipe/auto \\(32 splits\\)" -- "$bin" builtin --suite dsv32-decode --op mla_sparse_decode
expect 2 "--sms=0 is not a whole number in 1..4096" -- "$bin" builtin --sms 0
expect 2 "--sms=x is not a whole number" -- "$bin" builtin --sms x
expect 2 "unknown suite 'nosuch'" -- "$bin" builtin --suite nosuch
expect 2 "unknown op 'bogus'" -- "$bin" builtin --suite anchors --op bogus
expect 2 "option --db does not apply to this command" -- "$bin" builtin --db x.db
expect 2 "option --sms does not apply to this command" -- "$bin" eval --sms 132

echo "$passes passed, $fails failed"
[ "$fails" -eq 0 ]
