"""Hand-written nccl-tests logs shared by the comm tests (an alpha-beta law: 30 us + S / (200/1.75 GB/s))."""

NEW_FORMAT = """\
[1,0]<stdout>:# nccl-tests version 2.13.8 nccl-headers=21805 nccl-library=21805
[1,0]<stdout>:# Collective test starting: all_reduce_perf
[1,0]<stdout>:# nThread 1 nGpus 1 minBytes 1048576 maxBytes 1073741824 step: 2(factor) warmup iters: 5 iters: 20 agg iters: 1 validation: 1 graph: 0
[1,0]<stdout>:#
[1,0]<stdout>:# Using devices
[1,0]<stdout>:#  Rank  0 Group  0 Pid  41 on node-0 device  0 [0x07] NVIDIA A100-SXM4-80GB
[1,0]<stdout>:#  Rank  1 Group  0 Pid  42 on node-0 device  1 [0x0f] NVIDIA A100-SXM4-80GB
[1,0]<stdout>:#  Rank  2 Group  0 Pid  43 on node-0 device  2 [0x47] NVIDIA A100-SXM4-80GB
[1,0]<stdout>:#  Rank  3 Group  0 Pid  44 on node-0 device  3 [0x4e] NVIDIA A100-SXM4-80GB
[1,0]<stdout>:#  Rank  4 Group  0 Pid  45 on node-0 device  4 [0x87] NVIDIA A100-SXM4-80GB
[1,0]<stdout>:#  Rank  5 Group  0 Pid  46 on node-0 device  5 [0x90] NVIDIA A100-SXM4-80GB
[1,0]<stdout>:#  Rank  6 Group  0 Pid  47 on node-0 device  6 [0xb7] NVIDIA A100-SXM4-80GB
[1,0]<stdout>:#  Rank  7 Group  0 Pid  48 on node-0 device  7 [0xbd] NVIDIA A100-SXM4-80GB
node-0:41:41 [0] NCCL INFO Bootstrap : Using eth0:10.0.0.1<0>
node-0:41:41 [0] NCCL INFO NCCL version 2.18.5+cuda12.2
[1,0]<stdout>:#
[1,0]<stdout>:#                                                              out-of-place                       in-place
[1,0]<stdout>:#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong
[1,0]<stdout>:#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)
[1,0]<stdout>:     1048576        262144     float     sum      -1    39.18   26.77   46.84      0    38.78   27.04   47.31      0
[1,0]<stdout>:     2097152        524288     float     sum      -1    48.35   43.37   75.91      0    47.87   43.81   76.67      0
[1,0]<stdout>:     4194304       1048576     float     sum      -1    66.70   62.88  110.05      0    66.03   63.52  111.16      0
node-0:41:60 [0] NCCL INFO comm 0x5581 rank 0 nranks 8 - Init COMPLETE
[1,0]<stdout>:     8388608       2097152     float     sum      -1   103.40   81.13  141.97      0   102.37   81.95  143.41      0
[1,0]<stdout>:    16777216       4194304     float     sum      -1   176.80   94.89  166.06      0   175.03   95.85  167.74      0
[1,0]<stdout>:    33554432       8388608     float     sum      -1   323.60  103.69  181.46      0   320.37  104.74  183.29      0
[1,0]<stdout>:    67108864      16777216     float     sum      -1   617.20  108.73  190.28      0   611.03  109.83  192.20      0
[1,0]<stdout>:   134217728      33554432     float     sum      -1  1204.41  111.44  195.02      0  1192.36  112.56  196.99      0
[1,0]<stdout>:   268435456      67108864     float     sum      -1  2378.81  112.84  197.48      0  2355.02  113.98  199.47      0
[1,0]<stdout>:   536870912     134217728     float     sum      -1  4727.62  113.56  198.73      0  4680.34  114.71  200.74      0
[1,0]<stdout>:  1073741824     268435456     float     sum      -1  9425.24  113.92  199.36      0  9330.99  115.07  201.38      0
[1,0]<stdout>:# Out of bounds values : 0 OK
[1,0]<stdout>:# Avg bus bandwidth    : 158.2
[1,0]<stdout>:#
"""

# nccl-tests 2.0-era output: no "Collective test starting" line, no root column, an error column.
OLD_FORMAT = """\
# nThread 1 nGpus 4 minBytes 1048576 maxBytes 8388608 step: 2(factor) warmup iters: 5 iters: 20 validation: 1
#
# Using devices
#   Rank  0 Group  0 Pid  7 on host device  0 [0x1a] NVIDIA H100 80GB HBM3
#   Rank  1 Group  0 Pid  7 on host device  1 [0x1b] NVIDIA H100 80GB HBM3
#   Rank  2 Group  0 Pid  7 on host device  2 [0x1c] NVIDIA H100 80GB HBM3
#   Rank  3 Group  0 Pid  7 on host device  3 [0x1d] NVIDIA H100 80GB HBM3
#
#                                                     out-of-place                       in-place
#       size         count    type   redop     time   algbw   busbw  error     time   algbw   busbw  error
#        (B)    (elements)                     (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)
     1048576        262144   float    none    20.10   52.17   39.13  0e+00    20.00     N/A     N/A    N/A
     2097152        524288   float    none    30.20   69.44   52.08  0e+00    30.00     N/A     N/A    N/A
     4194304       1048576   float    none    50.40   83.22   62.42  0e+00      N/A     N/A     N/A    N/A
     8388608       2097152   float    none    90.80   92.39   69.29  0e+00    90.00     N/A     N/A    N/A
# Out of bounds values : 0 OK
# Avg bus bandwidth    : 55.7
"""
