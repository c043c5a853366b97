func.func @two_sums(%x: tensor<?xf32>, %idx: tensor<?xi32>, %n: index) -> tensor<?xf32> {
  %0 = seg.sum %x, %idx, %n : tensor<?xf32>, tensor<?xi32> -> tensor<?xf32>
  %1 = seg.sum %0, %idx, %n : tensor<?xf32>, tensor<?xi32> -> tensor<?xf32>
  return %1 : tensor<?xf32>
}
