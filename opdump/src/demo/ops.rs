//! The demo network's kernels: plain f32 loops, NCHW layout, computed for real.

/// `y[n,o,i,j] = Σ_c,p,q x[n,c,i+p,j+q] · w[o,c,p,q]` (valid padding, stride 1).
pub fn conv2d(x: &[f32], xs: [usize; 4], w: &[f32], ws: [usize; 4]) -> (Vec<f32>, [usize; 4]) {
    let [n, c, h, wd] = xs;
    let [o, wc, kh, kw] = ws;
    debug_assert_eq!(c, wc);
    let (oh, ow) = (h - kh + 1, wd - kw + 1);
    let mut y = vec![0f32; n * o * oh * ow];
    for b in 0..n {
        for oc in 0..o {
            let out = &mut y[(b * o + oc) * oh * ow..][..oh * ow];
            for ic in 0..c {
                let img = &x[(b * c + ic) * h * wd..][..h * wd];
                let ker = &w[(oc * c + ic) * kh * kw..][..kh * kw];
                for p in 0..kh {
                    for q in 0..kw {
                        let k = ker[p * kw + q];
                        for i in 0..oh {
                            let row = &img[(i + p) * wd + q..][..ow];
                            let orow = &mut out[i * ow..][..ow];
                            for (o, &v) in orow.iter_mut().zip(row) {
                                *o += k * v;
                            }
                        }
                    }
                }
            }
        }
    }
    (y, [n, o, oh, ow])
}

/// Gradient of [`conv2d`] with respect to the filter.
pub fn conv2d_backprop_filter(dy: &[f32], x: &[f32], xs: [usize; 4], ws: [usize; 4]) -> Vec<f32> {
    let [n, c, h, wd] = xs;
    let [o, _, kh, kw] = ws;
    let (oh, ow) = (h - kh + 1, wd - kw + 1);
    let mut dw = vec![0f32; o * c * kh * kw];
    for b in 0..n {
        for oc in 0..o {
            let g = &dy[(b * o + oc) * oh * ow..][..oh * ow];
            for ic in 0..c {
                let img = &x[(b * c + ic) * h * wd..][..h * wd];
                for p in 0..kh {
                    for q in 0..kw {
                        let mut acc = 0f32;
                        for i in 0..oh {
                            let row = &img[(i + p) * wd + q..][..ow];
                            for (gv, &v) in g[i * ow..][..ow].iter().zip(row) {
                                acc += gv * v;
                            }
                        }
                        dw[((oc * c + ic) * kh + p) * kw + q] += acc;
                    }
                }
            }
        }
    }
    dw
}

/// Gradient of [`conv2d`] with respect to the input.
pub fn conv2d_backprop_input(dy: &[f32], w: &[f32], xs: [usize; 4], ws: [usize; 4]) -> Vec<f32> {
    let [n, c, h, wd] = xs;
    let [o, _, kh, kw] = ws;
    let (oh, ow) = (h - kh + 1, wd - kw + 1);
    let mut dx = vec![0f32; n * c * h * wd];
    for b in 0..n {
        for oc in 0..o {
            let g = &dy[(b * o + oc) * oh * ow..][..oh * ow];
            for ic in 0..c {
                let ker = &w[(oc * c + ic) * kh * kw..][..kh * kw];
                let img = &mut dx[(b * c + ic) * h * wd..][..h * wd];
                for p in 0..kh {
                    for q in 0..kw {
                        let k = ker[p * kw + q];
                        for i in 0..oh {
                            let row = &mut img[(i + p) * wd + q..][..ow];
                            for (d, &gv) in row.iter_mut().zip(&g[i * ow..][..ow]) {
                                *d += k * gv;
                            }
                        }
                    }
                }
            }
        }
    }
    dx
}

/// `max(x, 0)`.
pub fn relu(x: &[f32]) -> Vec<f32> {
    x.iter().map(|&v| v.max(0.0)).collect()
}

/// Gradient of [`relu`]: `dy` where the forward output was positive.
pub fn relu_grad(dy: &[f32], y: &[f32]) -> Vec<f32> {
    dy.iter()
        .zip(y)
        .map(|(&g, &v)| if v > 0.0 { g } else { 0.0 })
        .collect()
}

/// 2×2 max pooling with stride 2; also returns the flat index of each maximum.
pub fn max_pool2(x: &[f32], xs: [usize; 4]) -> (Vec<f32>, Vec<u32>, [usize; 4]) {
    let [n, c, h, w] = xs;
    let (oh, ow) = (h / 2, w / 2);
    let mut y = Vec::with_capacity(n * c * oh * ow);
    let mut arg = Vec::with_capacity(n * c * oh * ow);
    for plane in 0..n * c {
        let base = plane * h * w;
        for i in 0..oh {
            for j in 0..ow {
                let mut best = base + 2 * i * w + 2 * j;
                for (di, dj) in [(0, 1), (1, 0), (1, 1)] {
                    let k = base + (2 * i + di) * w + 2 * j + dj;
                    if x[k] > x[best] {
                        best = k;
                    }
                }
                y.push(x[best]);
                arg.push(best as u32);
            }
        }
    }
    (y, arg, [n, c, oh, ow])
}

/// Gradient of [`max_pool2`].
pub fn max_pool2_grad(dy: &[f32], arg: &[u32], input_len: usize) -> Vec<f32> {
    let mut dx = vec![0f32; input_len];
    for (&g, &k) in dy.iter().zip(arg) {
        dx[k as usize] += g;
    }
    dx
}

/// `y = x · wᵀ` for `x: [n, k]`, `w: [m, k]`.
pub fn matmul_nt(x: &[f32], w: &[f32], n: usize, k: usize, m: usize) -> Vec<f32> {
    let mut y = vec![0f32; n * m];
    for b in 0..n {
        let xr = &x[b * k..][..k];
        for o in 0..m {
            let wr = &w[o * k..][..k];
            y[b * m + o] = xr.iter().zip(wr).map(|(a, b)| a * b).sum();
        }
    }
    y
}

/// `y = a · b` for `a: [n, k]`, `b: [k, m]`.
pub fn matmul_nn(a: &[f32], b: &[f32], n: usize, k: usize, m: usize) -> Vec<f32> {
    let mut y = vec![0f32; n * m];
    for i in 0..n {
        for p in 0..k {
            let av = a[i * k + p];
            for (o, &bv) in y[i * m..][..m].iter_mut().zip(&b[p * m..][..m]) {
                *o += av * bv;
            }
        }
    }
    y
}

/// `y = aᵀ · b` for `a: [n, m]`, `b: [n, k]` (weight gradients).
pub fn matmul_tn(a: &[f32], b: &[f32], n: usize, m: usize, k: usize) -> Vec<f32> {
    let mut y = vec![0f32; m * k];
    for r in 0..n {
        for i in 0..m {
            let av = a[r * m + i];
            for (o, &bv) in y[i * k..][..k].iter_mut().zip(&b[r * k..][..k]) {
                *o += av * bv;
            }
        }
    }
    y
}

/// Adds `bias[m]` to every row of `x: [n, m]`.
pub fn bias_add(x: &[f32], bias: &[f32]) -> Vec<f32> {
    x.chunks(bias.len())
        .flat_map(|r| r.iter().zip(bias).map(|(a, b)| a + b))
        .collect()
}

/// Sum over rows: the gradient of [`bias_add`] for the bias.
pub fn bias_add_grad(dy: &[f32], m: usize) -> Vec<f32> {
    let mut g = vec![0f32; m];
    for r in dy.chunks(m) {
        for (a, b) in g.iter_mut().zip(r) {
            *a += b;
        }
    }
    g
}

/// Mean softmax cross-entropy of `logits: [n, m]` with integer labels; returns (loss, dlogits).
pub fn softmax_cross_entropy(logits: &[f32], labels: &[i32], m: usize) -> (f32, Vec<f32>) {
    let n = labels.len();
    let mut grad = vec![0f32; logits.len()];
    let mut loss = 0f32;
    for (b, &label) in labels.iter().enumerate() {
        let row = &logits[b * m..][..m];
        let mx = row.iter().copied().fold(f32::NEG_INFINITY, f32::max);
        let sum: f32 = row.iter().map(|v| (v - mx).exp()).sum();
        for (j, &v) in row.iter().enumerate() {
            let p = (v - mx).exp() / sum;
            grad[b * m + j] = (p - (j as i32 == label) as u8 as f32) / n as f32;
        }
        loss -= (row[label as usize] - mx) - sum.ln();
    }
    (loss / n as f32, grad)
}

/// Momentum SGD in place: `v = momentum·v + g; w -= lr·v`.
pub fn apply_momentum(w: &mut [f32], v: &mut [f32], g: &[f32], lr: f32, momentum: f32) {
    for ((w, v), g) in w.iter_mut().zip(v.iter_mut()).zip(g) {
        *v = momentum * *v + g;
        *w -= lr * *v;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conv_gradients_match_finite_differences() {
        let xs = [1, 2, 5, 5];
        let ws = [3, 2, 3, 3];
        let x: Vec<f32> = (0..50).map(|i| ((i * 7 % 11) as f32 - 5.0) / 7.0).collect();
        let w: Vec<f32> = (0..54).map(|i| ((i * 5 % 13) as f32 - 6.0) / 9.0).collect();
        let (y, _) = conv2d(&x, xs, &w, ws);
        // loss = Σ y² / 2, dy = y
        let loss = |x: &[f32], w: &[f32]| -> f64 {
            conv2d(x, xs, w, ws)
                .0
                .iter()
                .map(|v| (*v as f64).powi(2) / 2.0)
                .sum()
        };
        let dw = conv2d_backprop_filter(&y, &x, xs, ws);
        let dx = conv2d_backprop_input(&y, &w, xs, ws);
        let eps = 1e-2f32;
        for k in [0usize, 7, 30, 53] {
            let (mut wp, mut wm) = (w.clone(), w.clone());
            wp[k] += eps;
            wm[k] -= eps;
            let num = (loss(&x, &wp) - loss(&x, &wm)) / (2.0 * eps as f64);
            assert!(
                (num - dw[k] as f64).abs() < 1e-2 * (1.0 + num.abs()),
                "dw[{k}]"
            );
        }
        for k in [0usize, 12, 24, 49] {
            let (mut xp, mut xm) = (x.clone(), x.clone());
            xp[k] += eps;
            xm[k] -= eps;
            let num = (loss(&xp, &w) - loss(&xm, &w)) / (2.0 * eps as f64);
            assert!(
                (num - dx[k] as f64).abs() < 1e-2 * (1.0 + num.abs()),
                "dx[{k}]"
            );
        }
    }

    #[test]
    fn pooling_softmax_and_matmuls() {
        let x = [
            1.0, 5.0, 2.0, 0.0, 3.0, 4.0, 8.0, 7.0, 0.0, 0.0, 1.0, 1.0, 9.0, 0.0, 2.0, 3.0,
        ];
        let (y, arg, s) = max_pool2(&x, [1, 1, 4, 4]);
        assert_eq!((y, s), (vec![5.0, 8.0, 9.0, 3.0], [1, 1, 2, 2]));
        assert_eq!(max_pool2_grad(&[1.0; 4], &arg, 16).iter().sum::<f32>(), 4.0);
        let (loss, g) = softmax_cross_entropy(&[0.0, 0.0], &[1], 2);
        assert!((loss - std::f32::consts::LN_2).abs() < 1e-6);
        assert_eq!(g, vec![0.5, -0.5]);
        let a = [1.0, 2.0, 3.0, 4.0]; // 2x2
        assert_eq!(matmul_nt(&a, &a, 2, 2, 2), vec![5.0, 11.0, 11.0, 25.0]);
        assert_eq!(matmul_nn(&a, &a, 2, 2, 2), vec![7.0, 10.0, 15.0, 22.0]);
        assert_eq!(matmul_tn(&a, &a, 2, 2, 2), vec![10.0, 14.0, 14.0, 20.0]);
    }
}
