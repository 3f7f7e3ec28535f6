;; Observes what a run cannot decide by itself: writes the wall clock, the monotonic clock
;; read twice and 16 random bytes (40 bytes, little-endian words) to /outputs/seen. The
;; worker's WASM tests run it free and deterministic.
(module
  (import "wasi_snapshot_preview1" "fd_write" (func $fd_write (param i32 i32 i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "path_open" (func $path_open (param i32 i32 i32 i32 i32 i64 i64 i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "clock_time_get" (func $clock_time_get (param i32 i64 i32) (result i32)))
  (import "wasi_snapshot_preview1" "random_get" (func $random_get (param i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "proc_exit" (func $proc_exit (param i32)))
  (memory (export "memory") 1)
  (data (i32.const 200) "seen")
  (func (export "_start")
    (drop (call $clock_time_get (i32.const 0) (i64.const 1) (i32.const 96)))
    (drop (call $clock_time_get (i32.const 1) (i64.const 1) (i32.const 104)))
    (drop (call $clock_time_get (i32.const 1) (i64.const 1) (i32.const 112)))
    (drop (call $random_get (i32.const 120) (i32.const 16)))
    ;; /outputs is fd 4; created or truncated, for writing.
    (if (call $path_open (i32.const 4) (i32.const 1) (i32.const 200) (i32.const 4)
            (i32.const 9) (i64.const 64) (i64.const 0) (i32.const 0) (i32.const 32))
      (then (call $proc_exit (i32.const 9))))
    (i32.store (i32.const 0) (i32.const 96))
    (i32.store (i32.const 4) (i32.const 40))
    (drop (call $fd_write (i32.load (i32.const 32)) (i32.const 0) (i32.const 1) (i32.const 8)))))
