-- lib/peaks: the hardware limits a roofline is drawn against.
--
-- Includes: (none)
--
-- tk_device_peaks() -> TABLE (priority, pattern, device, bytes_per_s, fp8, bf16, fp16, tf32,
--                             fp32, fp64, int8)
--   one row per data-centre GPU: `pattern` is a case-insensitive regular expression on the device
--   name the trace records (`devices.name`: 'NVIDIA H200', 'NVIDIA H100 80GB HBM3',
--   'NVIDIA A100-SXM4-80GB', 'AMD Instinct MI300X', ...); the first match by `priority` wins
--   (so 'H100 PCIe' is tried before 'H100'). bytes_per_s is the DRAM (HBM / GDDR) bandwidth; the
--   others are DENSE peak FLOP/s (no 2:4 sparsity) of the matrix units per data type (tensor
--   cores / AMD matrix cores; fp32 = the FP32 CUDA-core / vector peak, as torch's default fp32
--   matmul does not use TF32 on CUDA; fp64 = the FP64 tensor / matrix peak), at the boost clock,
--   from the vendors' datasheets (NVIDIA A100 / H100 / H200 / HGX B200 / L40S / L4 / A10; AMD
--   Instinct MI250 / MI250X / MI300X / MI325X). NULL where the device has no such unit.
--   A real kernel reaches 60-90 % of these at best; they are the roof, not a target.
--   Override for any device with the DuckDB variables `peak_tflops` (replaces the compute peak
--   of every op) and `peak_tbps` (replaces the bandwidth) -- `tracekit sql --param
--   peak_tflops=989`, `tracekit diagnose --peak-tflops 989 --peak-tbps 4.8`.
--
-- tk_peak_flops(p, dtype) -> DOUBLE
--   the dense peak FLOP/s of peaks row p (a struct of tk_device_peaks' columns) for a dtype class
--   (`tk_dtype_class`: 'fp8', 'bf16', 'fp16', 'fp32', 'fp64', 'int8'); the bf16 peak for NULL.
--
-- tk_roof(flops, intensity, peak_flops_per_s, peak_bytes_per_s) -> VARCHAR
--   the roof that limits work of this arithmetic intensity (FLOP/byte): 'compute' when it does
--   FLOPs and its intensity is at or right of the ridge point (peak FLOP/s / peak bytes/s),
--   else 'memory'.
--
-- tk_roof_bound(flops, intensity, pct_peak_flops, pct_peak_bytes, peak_flops_per_s,
--               peak_bytes_per_s, latency_pct) -> VARCHAR
--   what bounds it: NULL when a peak is unknown; 'latency' when it reaches less than latency_pct
--   % of both the peak FLOP/s and the peak bandwidth (NULL percentages count as 0); else its roof
--   (`tk_roof`). The one rule of `roofline`, `phase_roofline` and diagnose's whole-trace row.
CREATE OR REPLACE MACRO tk_device_peaks() AS TABLE
    SELECT * FROM (VALUES
        --  prio  pattern                 device               DRAM B/s  fp8       bf16      fp16      tf32      fp32     fp64     int8
        ( 10, 'B200',                    'NVIDIA B200 (HGX)',  7.7e12,   4.5e15,   2.25e15,  2.25e15,  1.1e15,   75e12,   37e12,   4.5e15),
        ( 20, 'H200 NVL',                'NVIDIA H200 NVL',    4.8e12,   1.671e15, 835.5e12, 835.5e12, 417.5e12, 60e12,   60e12,   1.671e15),
        ( 21, 'H200',                    'NVIDIA H200 SXM',    4.8e12,   1.979e15, 989.4e12, 989.4e12, 494.7e12, 66.9e12, 66.9e12, 1.979e15),
        ( 30, 'H100 NVL',                'NVIDIA H100 NVL',    3.9e12,   1.671e15, 835.5e12, 835.5e12, 417.5e12, 60e12,   60e12,   1.671e15),
        ( 31, 'H100 PCIe',               'NVIDIA H100 PCIe',   2.0e12,   1.513e15, 756.5e12, 756.5e12, 378e12,   51.2e12, 51.2e12, 1.513e15),
        ( 32, 'H100',                    'NVIDIA H100 SXM',    3.35e12,  1.979e15, 989.4e12, 989.4e12, 494.7e12, 66.9e12, 66.9e12, 1.979e15),
        ( 40, 'A100.*(40GB|40G)',        'NVIDIA A100 40GB',   1.555e12, NULL,     312e12,   312e12,   156e12,   19.5e12, 19.5e12, 624e12),
        ( 41, 'A100.*PCIe',              'NVIDIA A100 80GB PCIe', 1.935e12, NULL,  312e12,   312e12,   156e12,   19.5e12, 19.5e12, 624e12),
        ( 42, 'A100',                    'NVIDIA A100 80GB SXM', 2.039e12, NULL,   312e12,   312e12,   156e12,   19.5e12, 19.5e12, 624e12),
        ( 50, 'L40S',                    'NVIDIA L40S',        864e9,    733e12,   362.05e12, 362.05e12, 183e12, 91.6e12, NULL,    733e12),
        ( 51, '\bL4\b',                  'NVIDIA L4',          300e9,    242.5e12, 121e12,   121e12,   60e12,    30.3e12, NULL,    242.5e12),
        ( 52, '\bA10\b',                 'NVIDIA A10',         600e9,    NULL,     125e12,   125e12,   62.5e12,  31.2e12, NULL,    250e12),
        ( 60, 'MI325X',                  'AMD Instinct MI325X', 6.0e12,  2.615e15, 1.307e15, 1.307e15, 653.7e12, 163.4e12, 163.4e12, 2.615e15),
        ( 61, 'MI300X',                  'AMD Instinct MI300X', 5.3e12,  2.615e15, 1.307e15, 1.307e15, 653.7e12, 163.4e12, 163.4e12, 2.615e15),
        ( 62, 'MI250X',                  'AMD Instinct MI250X', 3.2768e12, NULL,   383e12,   383e12,   NULL,     95.7e12, 95.7e12, 383e12),
        ( 63, 'MI250',                   'AMD Instinct MI250', 3.2768e12, NULL,    362.1e12, 362.1e12, NULL,     90.5e12, 90.5e12, 362.1e12)
    ) t(priority, pattern, device, bytes_per_s, fp8, bf16, fp16, tf32, fp32, fp64, int8);

CREATE OR REPLACE MACRO tk_peak_flops(p, dtype) AS
    CASE coalesce(dtype, 'bf16')
      WHEN 'fp8' THEN p.fp8 WHEN 'bf16' THEN p.bf16 WHEN 'fp16' THEN p.fp16
      WHEN 'fp32' THEN p.fp32 WHEN 'fp64' THEN p.fp64 WHEN 'int8' THEN p.int8
    END;

CREATE OR REPLACE MACRO tk_roof(flops, intensity, peak_flops_per_s, peak_bytes_per_s) AS
    CASE WHEN flops > 0 AND intensity >= peak_flops_per_s / peak_bytes_per_s THEN 'compute'
         ELSE 'memory' END;

CREATE OR REPLACE MACRO tk_roof_bound(flops, intensity, pct_peak_flops, pct_peak_bytes,
                                      peak_flops_per_s, peak_bytes_per_s, latency_pct) AS
    CASE WHEN peak_flops_per_s IS NULL OR peak_bytes_per_s IS NULL THEN NULL
         WHEN greatest(coalesce(pct_peak_flops, 0), coalesce(pct_peak_bytes, 0)) < latency_pct THEN 'latency'
         ELSE tk_roof(flops, intensity, peak_flops_per_s, peak_bytes_per_s) END;
