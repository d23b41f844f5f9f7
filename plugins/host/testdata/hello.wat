;; The smallest complete lease strategy: ABI v1 in hand-written WAT, no
;; toolchain but wabt. It abstains on every input (leaves the lease to
;; someone else). Tests use it to pin the ABI and for hot-reload cases; the
;; string VERSION is replaced by the tests to make distinct modules.
;;   wat2wasm hello.wat -o hello.wasm
(module
  (import "lease_strategy" "read_input" (func $read_input (param i32 i32) (result i32)))
  (import "lease_strategy" "write_output" (func $write_output (param i32 i32)))
  (memory (export "memory") 1)
  (data (i32.const 1024) "{\"name\":\"example.com/hello\",\"version\":\"VERSION\"}")
  (data (i32.const 2048) "{\"ranking\":[],\"action\":\"abstain\",\"preempt\":false,\"reason\":\"hello\"}")
  (func (export "lease_strategy_abi_version") (result i32) (i32.const 1))
  (func (export "lease_strategy_info") (result i32)
    ;; the info document ends at the first NUL: find its length
    (local $n i32)
    (block $done
      (loop $scan
        (br_if $done (i32.eqz (i32.load8_u (i32.add (i32.const 1024) (local.get $n)))))
        (local.set $n (i32.add (local.get $n) (i32.const 1)))
        (br $scan)))
    (call $write_output (i32.const 1024) (local.get $n))
    (i32.const 0))
  (func (export "lease_strategy_decide") (result i32)
    (drop (call $read_input (i32.const 0) (i32.const 0)))
    (call $write_output (i32.const 2048) (i32.const 66))
    (i32.const 0)))
