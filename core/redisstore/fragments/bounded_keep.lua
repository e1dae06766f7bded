-- A recorded key must outlive the end of each rate's newest bucket by its period: keep is
-- the latest such time, and longest the longest period.
if recorded then
  local e = (newest + 1) * g + T
  if e > keep then keep = e end
  if T > longest then longest = T end
end
