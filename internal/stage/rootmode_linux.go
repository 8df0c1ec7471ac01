package stage

// RootMode is the mode of the view's root: the upper directory's, which
// overlayfs shows as the merged root (a chmod of the root lands there).
func (v *overlayView) RootMode() (uint32, error) { return DirMode(v.upper()) }
