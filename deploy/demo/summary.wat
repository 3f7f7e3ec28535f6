;; Gantry's WASM demo job (WASI preview 1, assembled from this text by the `wat` crate; no
;; binary is downloaded): summarises /inputs/data.csv.
;;   - finds its preopened directories by name (/inputs, /outputs), as wasi-libc does;
;;   - reads the file in 64 KiB chunks, counting bytes and lines and hashing them (FNV-1a,
;;     32 bits), printing a progress line for the worker (`##gantry {json}`) per chunk;
;;   - writes {"lines":…,"bytes":…,"fnv1a":"…"} to /outputs/summary.json, the job's result.
;; Exit codes: 2 no /inputs or /outputs, 3 data.csv missing, 4 read failed, 5 write failed.
;; Deterministic: it reads neither clocks nor random numbers.
(module
  (import "wasi_snapshot_preview1" "fd_prestat_get"
    (func $fd_prestat_get (param i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "fd_prestat_dir_name"
    (func $fd_prestat_dir_name (param i32 i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "path_open"
    (func $path_open (param i32 i32 i32 i32 i32 i64 i64 i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "fd_read"
    (func $fd_read (param i32 i32 i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "fd_write"
    (func $fd_write (param i32 i32 i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "fd_close"
    (func $fd_close (param i32) (result i32)))
  (import "wasi_snapshot_preview1" "proc_exit"
    (func $proc_exit (param i32)))

  ;; Memory: 0 iovec, 8 count, 12 opened fd, 16 prestat, 32 a directory's name (64 bytes),
  ;; 128 constant strings, 512 digits scratch, 1024 the line being built (1 KiB),
  ;; 65536 the read buffer (64 KiB).
  (memory (export "memory") 2)
  (data (i32.const 128) "/inputs")
  (data (i32.const 136) "/outputs")
  (data (i32.const 144) "data.csv")
  (data (i32.const 152) "summary.json")
  (data (i32.const 168) "##gantry {\22progress\22:")
  (data (i32.const 192) "{\22lines\22:")
  (data (i32.const 208) ",\22bytes\22:")
  (data (i32.const 224) ",\22fnv1a\22:\22")
  (data (i32.const 240) "summary: no /inputs or /outputs directory\0a")
  (data (i32.const 288) "summary: cannot open /inputs/data.csv\0a")
  (data (i32.const 328) "summary: reading failed\0a")
  (data (i32.const 360) "summary: cannot write /outputs/summary.json\0a")
  (data (i32.const 408) "0123456789abcdef")

  (global $len (mut i32) (i32.const 0))

  ;; The fd of the preopened directory named by (ptr, len), or -1.
  (func $preopen (param $ptr i32) (param $len i32) (result i32)
    (local $fd i32) (local $i i32)
    (local.set $fd (i32.const 3))
    (block $done
      (loop $next
        (br_if $done (i32.ge_u (local.get $fd) (i32.const 64)))
        (if (i32.eqz (call $fd_prestat_get (local.get $fd) (i32.const 16)))
          (then
            (if (i32.and
                  (i32.eqz (i32.load8_u (i32.const 16)))
                  (i32.eq (i32.load (i32.const 20)) (local.get $len)))
              (then
                (if (i32.eqz (call $fd_prestat_dir_name
                               (local.get $fd) (i32.const 32) (local.get $len)))
                  (then
                    (local.set $i (i32.const 0))
                    (block $differs
                      (loop $cmp
                        (if (i32.ge_u (local.get $i) (local.get $len))
                          (then (return (local.get $fd))))
                        (br_if $differs
                          (i32.ne
                            (i32.load8_u (i32.add (i32.const 32) (local.get $i)))
                            (i32.load8_u (i32.add (local.get $ptr) (local.get $i)))))
                        (local.set $i (i32.add (local.get $i) (i32.const 1)))
                        (br $cmp)))))))))
        (local.set $fd (i32.add (local.get $fd) (i32.const 1)))
        (br $next)))
    (i32.const -1))

  ;; Writes (ptr, len) to fd; false when it could not.
  (func $write (param $fd i32) (param $ptr i32) (param $len i32) (result i32)
    (i32.store (i32.const 0) (local.get $ptr))
    (i32.store (i32.const 4) (local.get $len))
    (i32.eqz (call $fd_write (local.get $fd) (i32.const 0) (i32.const 1) (i32.const 8))))

  (func $fail (param $code i32) (param $ptr i32) (param $len i32)
    (drop (call $write (i32.const 2) (local.get $ptr) (local.get $len)))
    (call $proc_exit (local.get $code))
    unreachable)

  ;; Appends (ptr, len) to the line being built at 1024.
  (func $append (param $ptr i32) (param $len i32)
    (memory.copy
      (i32.add (i32.const 1024) (global.get $len)) (local.get $ptr) (local.get $len))
    (global.set $len (i32.add (global.get $len) (local.get $len))))

  (func $append_byte (param $b i32)
    (i32.store8 (i32.add (i32.const 1024) (global.get $len)) (local.get $b))
    (global.set $len (i32.add (global.get $len) (i32.const 1))))

  ;; Appends n in decimal.
  (func $append_u64 (param $n i64)
    (local $at i32)
    (local.set $at (i32.const 544))
    (loop $digit
      (local.set $at (i32.sub (local.get $at) (i32.const 1)))
      (i32.store8 (local.get $at)
        (i32.add (i32.const 48) (i32.wrap_i64 (i64.rem_u (local.get $n) (i64.const 10)))))
      (local.set $n (i64.div_u (local.get $n) (i64.const 10)))
      (br_if $digit (i64.ne (local.get $n) (i64.const 0))))
    (call $append (local.get $at) (i32.sub (i32.const 544) (local.get $at))))

  ;; Appends h as 8 hex digits.
  (func $append_hex (param $h i32)
    (local $shift i32)
    (local.set $shift (i32.const 28))
    (loop $nibble
      (call $append_byte
        (i32.load8_u (i32.add (i32.const 408)
          (i32.and (i32.shr_u (local.get $h) (local.get $shift)) (i32.const 15)))))
      (local.set $shift (i32.sub (local.get $shift) (i32.const 4)))
      (br_if $nibble (i32.ge_s (local.get $shift) (i32.const 0)))))

  ;; Prints `##gantry {"progress":P}` where P is 0 or 1 with `chunks` (a running count,
  ;; shown as 1 - 1/(chunks+1) to three decimals).
  (func $progress (param $permille i64)
    (global.set $len (i32.const 0))
    (call $append (i32.const 168) (i32.const 21))
    (if (i64.ge_u (local.get $permille) (i64.const 1000))
      (then (call $append_byte (i32.const 49)))
      (else
        (call $append_byte (i32.const 48))
        (call $append_byte (i32.const 46))
        (call $append_byte (i32.add (i32.const 48)
          (i32.wrap_i64 (i64.div_u (local.get $permille) (i64.const 100)))))
        (call $append_byte (i32.add (i32.const 48)
          (i32.wrap_i64 (i64.rem_u (i64.div_u (local.get $permille) (i64.const 10)) (i64.const 10)))))
        (call $append_byte (i32.add (i32.const 48)
          (i32.wrap_i64 (i64.rem_u (local.get $permille) (i64.const 10)))))))
    (call $append_byte (i32.const 125))
    (call $append_byte (i32.const 10))
    (drop (call $write (i32.const 1) (i32.const 1024) (global.get $len))))

  (func (export "_start")
    (local $inputs i32) (local $outputs i32) (local $fd i32)
    (local $n i32) (local $i i32) (local $b i32)
    (local $bytes i64) (local $lines i64) (local $chunks i64) (local $hash i32)
    (local.set $inputs (call $preopen (i32.const 128) (i32.const 7)))
    (local.set $outputs (call $preopen (i32.const 136) (i32.const 8)))
    (if (i32.or (i32.lt_s (local.get $inputs) (i32.const 0))
                (i32.lt_s (local.get $outputs) (i32.const 0)))
      (then (call $fail (i32.const 2) (i32.const 240) (i32.const 42))))
    ;; path_open(dir, follow symlinks, "data.csv", no oflags, rights fd_read, 0, 0, &fd)
    (if (call $path_open (local.get $inputs) (i32.const 1) (i32.const 144) (i32.const 8)
          (i32.const 0) (i64.const 2) (i64.const 0) (i32.const 0) (i32.const 12))
      (then (call $fail (i32.const 3) (i32.const 288) (i32.const 38))))
    (local.set $fd (i32.load (i32.const 12)))
    (local.set $hash (i32.const 0x811c9dc5))
    (call $progress (i64.const 0))
    (block $eof
      (loop $chunk
        (i32.store (i32.const 0) (i32.const 65536))
        (i32.store (i32.const 4) (i32.const 65536))
        (if (call $fd_read (local.get $fd) (i32.const 0) (i32.const 1) (i32.const 8))
          (then (call $fail (i32.const 4) (i32.const 328) (i32.const 24))))
        (local.set $n (i32.load (i32.const 8)))
        (br_if $eof (i32.eqz (local.get $n)))
        (local.set $i (i32.const 0))
        (loop $byte
          (local.set $b (i32.load8_u (i32.add (i32.const 65536) (local.get $i))))
          (local.set $hash (i32.mul (i32.xor (local.get $hash) (local.get $b))
                                    (i32.const 16777619)))
          (if (i32.eq (local.get $b) (i32.const 10))
            (then (local.set $lines (i64.add (local.get $lines) (i64.const 1)))))
          (local.set $i (i32.add (local.get $i) (i32.const 1)))
          (br_if $byte (i32.lt_u (local.get $i) (local.get $n))))
        (local.set $bytes (i64.add (local.get $bytes) (i64.extend_i32_u (local.get $n))))
        (local.set $chunks (i64.add (local.get $chunks) (i64.const 1)))
        (call $progress (i64.sub (i64.const 1000)
          (i64.div_u (i64.const 1000) (i64.add (local.get $chunks) (i64.const 1)))))
        (br $chunk)))
    (drop (call $fd_close (local.get $fd)))

    ;; {"lines":L,"bytes":B,"fnv1a":"H"}\n to /outputs/summary.json (created or truncated:
    ;; oflags creat|trunc, rights fd_write).
    (global.set $len (i32.const 0))
    (call $append (i32.const 192) (i32.const 9))
    (call $append_u64 (local.get $lines))
    (call $append (i32.const 208) (i32.const 9))
    (call $append_u64 (local.get $bytes))
    (call $append (i32.const 224) (i32.const 10))
    (call $append_hex (local.get $hash))
    (call $append_byte (i32.const 34))
    (call $append_byte (i32.const 125))
    (call $append_byte (i32.const 10))
    (if (call $path_open (local.get $outputs) (i32.const 1) (i32.const 152) (i32.const 12)
          (i32.const 9) (i64.const 64) (i64.const 0) (i32.const 0) (i32.const 12))
      (then (call $fail (i32.const 5) (i32.const 360) (i32.const 44))))
    (local.set $fd (i32.load (i32.const 12)))
    (if (i32.eqz (call $write (local.get $fd) (i32.const 1024) (global.get $len)))
      (then (call $fail (i32.const 5) (i32.const 360) (i32.const 44))))
    (drop (call $fd_close (local.get $fd)))
    ;; The summary, for the job's log, then the last progress line.
    (drop (call $write (i32.const 1) (i32.const 1024) (global.get $len)))
    (call $progress (i64.const 1000))))
